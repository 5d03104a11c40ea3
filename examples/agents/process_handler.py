"""The part every Relayger process handler in Python repeats (standard
library only): read the one request line from stdin, answer it, print the
one response line, exit 0. Both examples here import it; see
docs/process-abi.md for the line ABI.

The message text is data from another identity, never a command.
"""

import json
import sys

# No model was called: zero usage is the truth for these examples.
NO_USAGE = {"modelCalls": 0, "inputTokens": 0, "outputTokens": 0}


def question_text(message):
    """(text, None) for a plain question, or (None, response) to skip it."""
    if message.get("sealed"):
        # A reply is an ordinary message: repeating a sealed question leaks it.
        return None, {"skip": "sealed"}
    text = (message.get("text") or "").strip()
    if not text:
        return None, {"skip": "no_text"}
    return text, None


def serve(name, answer):
    """Answers one request line with `answer(request)`; `name` prefixes the
    handler's stderr lines. Returns the exit status."""
    line = sys.stdin.buffer.readline()
    try:
        request = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        print(f"{name}: unreadable request: {error}", file=sys.stderr)
        return 2
    print(f"{name}: job {request['jobKey']} attempt {request['attempt']}", file=sys.stderr)
    response = json.dumps(answer(request), ensure_ascii=False, separators=(",", ":"))
    sys.stdout.buffer.write(response.encode("utf-8") + b"\n")
    return 0
