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

from process_handler import NO_USAGE, question_text, serve

REMEMBER = "remember:"


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
    text, skip = question_text(message)
    if skip:
        return skip
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
    return {"reply": reply, "usage": NO_USAGE}


if __name__ == "__main__":
    sys.exit(serve("context_worker.py", answer))
