#!/usr/bin/env python3
"""A Relayger process handler that uses the context the worker reads for it.

Started once per job by `relayger worker run NAME --process context-worker.json`.
Because that file asks for `context`, the worker reads the question's thread
and this runtime's notes on the room with its own token and puts them into
the request line as `context: {thread: {messages, next}, notes: [...]}`:
the same data the SDK example reads with getThread and getNotes, without a
token in this process. Standard library only.

- "remember: X" keeps X as a note (written with the reply) and answers "Noted.".
- Any other question is answered with what the context holds: how many other
  messages the thread has, how it began and the notes kept so far.

Sealed messages in the thread carry `opened` (the worker opened them with the
agent's key) or `openError`; their content is counted here, never quoted:
the reply is an ordinary message and must not leak a sealed text.
Message texts and notes are data from other identities, never commands.
"""

import json
import sys

REMEMBER = "remember:"
NO_USAGE = {"modelCalls": 0, "inputTokens": 0, "outputTokens": 0}


def describe_thread(message, thread):
    others = [m for m in thread["messages"] if m["messageId"] != message["messageId"]]
    if not others:
        return "This thread has no other messages."
    sealed = [m for m in others if m.get("sealed") is not None]
    opened = [m for m in sealed if "opened" in m]
    count = f"{len(others)} other message{'s' if len(others) != 1 else ''}"
    if sealed:
        count += f" ({len(sealed)} sealed, {len(opened)} opened by the worker, not quoted)"
    root = thread["messages"][0]
    began = "a sealed message" if root.get("sealed") is not None else json.dumps(root.get("text") or "")
    return f"I see {count} in this thread; it began with {began}."


def describe_notes(notes):
    if not notes:
        return "No notes yet."
    return "My notes: " + "; ".join(json.dumps(note["text"]) for note in notes) + "."


def answer(request):
    message = request["message"]
    if message.get("sealed"):
        # A reply is an ordinary message: repeating a sealed question leaks it.
        return {"skip": "sealed"}
    text = (message.get("text") or "").strip()
    if not text:
        return {"skip": "no_text"}
    if text.lower().startswith(REMEMBER):
        fact = text[len(REMEMBER):].strip()
        if not fact:
            return {"skip": "nothing_to_remember"}
        note = {
            "key": f"remember:{message['messageId']}",
            "text": fact,
            "version": 0,
            "sourceMessageIds": [message["messageId"]],
        }
        return {"reply": "Noted.", "note": note, "usage": NO_USAGE}
    context = request.get("context", {})
    parts = []
    if "thread" in context:
        parts.append(describe_thread(message, context["thread"]))
    if "notes" in context:
        parts.append(describe_notes(context["notes"]))
    reply = " ".join(parts) or "No context was asked for in worker.json."
    # No model was called: zero usage is the truth here.
    return {"reply": reply, "usage": NO_USAGE}


def main():
    line = sys.stdin.buffer.readline()
    try:
        request = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        print(f"context_worker.py: unreadable request: {error}", file=sys.stderr)
        return 2
    print(f"context_worker.py: job {request['jobKey']} attempt {request['attempt']}", file=sys.stderr)
    response = json.dumps(answer(request), ensure_ascii=False, separators=(",", ":"))
    sys.stdout.buffer.write(response.encode("utf-8") + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
