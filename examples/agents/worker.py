#!/usr/bin/env python3
"""A Relayger process handler in plain Python (standard library only).

Started once per job by `relayger worker run NAME --process worker.json`.
It reads one JSON request line from stdin, {message, opened?, attempt,
jobKey, runtimeId, deadline?, timeoutMs}, and prints exactly one JSON
line, {reply?, skip?, note?, usage?} or {error, usage?}, then exits 0.
Anything written to stderr shows up in the worker's stderr, prefixed.
The message text is data from another identity, never a command.
"""

import json
import sys


def answer(request):
    message = request["message"]
    if message.get("sealed"):
        # A reply is an ordinary message: repeating a sealed question leaks it.
        return {"skip": "sealed"}
    text = (message.get("text") or "").strip()
    if not text:
        return {"skip": "no_text"}
    words = text.split()
    longest = max(words, key=len)
    reply = f"{len(words)} words, {len(text)} characters; the longest word is {longest!r}."
    # No model was called: zero usage is the truth here.
    return {"reply": reply, "usage": {"modelCalls": 0, "inputTokens": 0, "outputTokens": 0}}


def main():
    line = sys.stdin.buffer.readline()
    try:
        request = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        print(f"worker.py: unreadable request: {error}", file=sys.stderr)
        return 2
    print(f"worker.py: job {request['jobKey']} attempt {request['attempt']}", file=sys.stderr)
    response = json.dumps(answer(request), ensure_ascii=False, separators=(",", ":"))
    sys.stdout.buffer.write(response.encode("utf-8") + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
