//! Server-sent events as the A2A JSON-RPC binding streams them: a decoder
//! fed the response body chunk by chunk, yielding each event's name and
//! data (W3C EventSource rules: lines end with LF, CRLF or CR; `data`
//! lines join with LF; a blank line dispatches; comments, `id` and `retry`
//! are ignored). Everything it holds is bounded, so a remote agent that
//! never ends a line or an event costs at most `max_event_bytes`.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    /// `message` unless an `event:` line named it.
    pub name: String,
    pub data: String,
}

/// The stream broke the decoder's bounds or is not text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SseError {
    /// A line or an event grew past the limit.
    TooLarge,
    /// A line is not UTF-8.
    NotText,
}

#[derive(Debug)]
pub(super) struct SseDecoder {
    max_event_bytes: usize,
    line: Vec<u8>,
    /// The last byte fed was a CR: an LF right after it ends nothing more.
    after_cr: bool,
    name: Option<String>,
    data: Option<String>,
}

impl SseDecoder {
    pub(super) fn new(max_event_bytes: usize) -> SseDecoder {
        SseDecoder {
            max_event_bytes,
            line: Vec::new(),
            after_cr: false,
            name: None,
            data: None,
        }
    }

    /// Feeds the next chunk of the body; the events it completed.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_ended(&line)? {
                        events.push(event);
                    }
                }
                _ => {
                    if self.held() >= self.max_event_bytes {
                        return Err(SseError::TooLarge);
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    fn held(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn line_ended(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseError> {
        if line.is_empty() {
            let name = self.name.take();
            return Ok(self.data.take().map(|data| SseEvent {
                name: name.unwrap_or_else(|| "message".to_owned()),
                data,
            }));
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotText)?;
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            "event" => self.name = Some(value.to_owned()),
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            name: name.into(),
            data: data.into(),
        }
    }

    /// Feeds `chunks` one after the other; every event, or the first error.
    fn decode(chunks: &[&str], max: usize) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::new(max);
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk.as_bytes())?);
        }
        Ok(events)
    }

    #[test]
    fn streams_decode_into_events() {
        // What the Python SDK sends: one data line, a blank line.
        let sdk = r#"data: {"result": {"task": {"id": "t"}}, "id": "2", "jsonrpc": "2.0"}"#;
        assert_eq!(
            decode(&[&format!("{sdk}\r\n\r\n")], 1024),
            Ok(vec![event("message", &sdk[6..])])
        );
        type Decoded = Result<Vec<SseEvent>, SseError>;
        let table: [(&[&str], Decoded); 10] = [
            // Split anywhere, even between CR and LF.
            (
                &["da", "ta: a\r", "\n", "\r", "\ndata: b\n\n"],
                Ok(vec![event("message", "a"), event("message", "b")]),
            ),
            // Bare CR ends lines too.
            (&["data: a\r\r"], Ok(vec![event("message", "a")])),
            // Data lines join with LF; no space after the colon is kept.
            (
                &["data: one\ndata:two\ndata\n\n"],
                Ok(vec![event("message", "one\ntwo\n")]),
            ),
            // A named event; the name does not outlive its event.
            (
                &["event: error\ndata: x\n\ndata: y\n\n"],
                Ok(vec![event("error", "x"), event("message", "y")]),
            ),
            // Comments, ids, retries and unknown fields are ignored; an
            // event without data is not dispatched.
            (
                &[": keep-alive\n\nid: 7\nretry: 10\nfoo: bar\n\n"],
                Ok(vec![]),
            ),
            // An event not ended by a blank line is not dispatched (yet).
            (&["data: half\n"], Ok(vec![])),
            (&[], Ok(vec![])),
            // Bounds: a line that never ends, data that never dispatches.
            (&["data: 0123456789abcdef"], Err(SseError::TooLarge)),
            (
                &["data: 0123456\n", "data: 0123456\n"],
                Err(SseError::TooLarge),
            ),
            (&["data: \u{ff}\n\n"], Ok(vec![event("message", "\u{ff}")])),
        ];
        for (chunks, expected) in table {
            assert_eq!(decode(chunks, 16), expected, "{chunks:?}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let mut decoder = SseDecoder::new(64);
        assert_eq!(decoder.push(b"data: \xff\n"), Err(SseError::NotText));
    }
}
