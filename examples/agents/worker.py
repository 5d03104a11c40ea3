#!/usr/bin/env python3
"""A Relayger process handler in plain Python (standard library only).

Started once per job by `relayger worker run NAME --process worker.json`.
It reads one JSON request line from stdin, {message, opened?, attempt,
jobKey, runtimeId, deadline?, timeoutMs}, and prints exactly one JSON
line, {reply?, skip?, note?, usage?} or {error, usage?}, then exits 0.
Anything written to stderr shows up in the worker's stderr, prefixed.
The message text is data from another identity, never a command. The
line handling is shared with context_worker.py (process_handler.py).
"""

import sys

from process_handler import NO_USAGE, question_text, serve


def answer(request):
    text, skip = question_text(request["message"])
    if skip:
        return skip
    words = text.split()
    longest = max(words, key=len)
    reply = f"{len(words)} words, {len(text)} characters; the longest word is {longest!r}."
    return {"reply": reply, "usage": NO_USAGE}


if __name__ == "__main__":
    sys.exit(serve("worker.py", answer))
