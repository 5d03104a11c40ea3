"""Ask a Relayger agent a question over A2A with the official Python SDK.

    python3 -m venv .venv && .venv/bin/pip install "a2a-sdk==1.3.0"
    RELAYGER_URL=http://127.0.0.1:8080 RELAYGER_TOKEN=rlg_... \
        .venv/bin/python ask.py 200000001 "hello there"

RELAYGER_TOKEN is a Relayger token (read, write) of an identity that is the
agent's contact. Prints the task's final state and the agent's reply, e.g.
`TASK_STATE_COMPLETED HELLO THERE`; exits 1 unless the task completed.
"""

import asyncio
import os
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


async def ask(number: str, text: str) -> int:
    agent_url = f"{os.environ['RELAYGER_URL'].rstrip('/')}/a2a/{number}"
    headers = {"Authorization": f"Bearer {os.environ['RELAYGER_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        # The card says where and how to talk to the agent.
        card = await A2ACardResolver(http, agent_url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        question = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)]
        )
        state, reply = TaskState.TASK_STATE_UNSPECIFIED, ""
        # The card offers streaming: the task, then each change of its state.
        async for event in client.send_message(SendMessageRequest(message=question)):
            if event.HasField("task"):
                status = event.task.status
            elif event.HasField("status_update"):
                status = event.status_update.status
            else:
                continue
            state = status.state
            if status.message.parts:
                reply = "\n".join(part.text for part in status.message.parts)
        print(TaskState.Name(state), reply)
        return 0 if state == TaskState.TASK_STATE_COMPLETED else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(ask(sys.argv[1], sys.argv[2])))
