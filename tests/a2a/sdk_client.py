"""Drives a Relayger server's A2A agents with the official Python client
(a2a-sdk), for tests/tests/a2a_server.rs. Prints one JSON object with what
each scenario saw.

Environment: RELAYGER_URL, ASKER_TOKEN (a contact of the three agents),
STRANGER_TOKEN (no contact), UPPERCASE_NUMBER (a `--builtin uppercase`
worker), FAILING_NUMBER (a handler that throws, maxAttempts 1),
PATIENT_NUMBER (a handler that waits for its abort signal).
"""

import asyncio
import json
import os
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

BASE = os.environ["RELAYGER_URL"].rstrip("/")


def agent_url(number: str) -> str:
    return f"{BASE}/a2a/{number}"


def question(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    )


def text_of(message) -> str:
    return "\n".join(part.text for part in message.parts)


def status_of(event):
    if event.HasField("task"):
        return event.task.id, event.task.status
    if event.HasField("status_update"):
        return event.status_update.task_id, event.status_update.status
    return None, None


async def client_for(http, number, **config):
    card = await A2ACardResolver(http, agent_url(number)).get_agent_card()
    return card, ClientFactory(ClientConfig(httpx_client=http, **config)).create(card)


async def main() -> dict:
    seen = {}
    asker = {"Authorization": f"Bearer {os.environ['ASKER_TOKEN']}"}
    async with httpx.AsyncClient(headers=asker, timeout=60) as http:
        upper = os.environ["UPPERCASE_NUMBER"]
        card, blocking = await client_for(http, upper, streaming=False)
        iface = card.supported_interfaces[0]
        seen["card"] = {
            "name": card.name,
            "url": iface.url,
            "binding": iface.protocol_binding,
            "streaming": card.capabilities.streaming,
        }

        # Send, blocking: the task comes back completed with the reply.
        events = [e async for e in blocking.send_message(question("hello from python"))]
        task = events[-1].task
        seen["send"] = {
            "taskId": task.id,
            "state": TaskState.Name(task.status.state),
            "reply": text_of(task.status.message),
            "artifact": text_of(task.artifacts[0]) if task.artifacts else None,
        }
        got = await blocking.get_task(GetTaskRequest(id=task.id))
        seen["get"] = TaskState.Name(got.status.state)

        # Streaming: the task, then its states to the end.
        _, streaming = await client_for(http, upper)
        states, reply = [], ""
        async for event in streaming.send_message(question("stream from python")):
            _, status = status_of(event)
            if status is not None:
                states.append(TaskState.Name(status.state))
                if status.message.parts:
                    reply = text_of(status.message)
        seen["stream"] = {"states": states, "reply": reply}

        # A handler that throws: FAILED with the reason code.
        _, failing = await client_for(http, os.environ["FAILING_NUMBER"], streaming=False)
        events = [e async for e in failing.send_message(question("boom please"))]
        task = events[-1].task
        seen["failing"] = {
            "state": TaskState.Name(task.status.state),
            "reason": text_of(task.status.message),
        }

        # Cancel while the handler works: subscribe, wait for WORKING, cancel.
        patient = os.environ["PATIENT_NUMBER"]
        _, submit = await client_for(http, patient, streaming=False, polling=True)
        events = [e async for e in submit.send_message(question("take your time"))]
        task_id = events[-1].task.id
        _, watcher = await client_for(http, patient)
        watched, canceled = [], None
        async for event in watcher.subscribe(SubscribeToTaskRequest(id=task_id)):
            _, status = status_of(event)
            if status is None:
                continue
            watched.append(TaskState.Name(status.state))
            if status.state == TaskState.TASK_STATE_WORKING and canceled is None:
                canceled = await submit.cancel_task(CancelTaskRequest(id=task_id))
        seen["cancel"] = {
            "taskId": task_id,
            "answer": TaskState.Name(canceled.status.state) if canceled else None,
            "watched": watched,
        }

    # Someone who is not the agent's contact is refused.
    stranger = {"Authorization": f"Bearer {os.environ['STRANGER_TOKEN']}"}
    async with httpx.AsyncClient(headers=stranger, timeout=60) as http:
        _, client = await client_for(http, upper, streaming=False)
        try:
            [e async for e in client.send_message(question("let me in"))]
            seen["stranger"] = "answered"
        except Exception as error:  # the SDK raises the HTTP error
            seen["stranger"] = f"{type(error).__name__}: {error}"
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
