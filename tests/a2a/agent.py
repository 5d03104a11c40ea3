"""An outside A2A agent for the end-to-end tests, served by the official
Python SDK (`a2a-sdk[http-server]`) behind uvicorn.

    agent.py --mode upper|reverse|fail|reject|wait [--no-streaming] [--token-env VAR]

It binds 127.0.0.1 on a free port and prints, one line each on stdout:

    listening http://127.0.0.1:PORT
    request METHOD bearer=ok|missing|wrong     for every JSON-RPC call
    working TASK_ID                            when a `wait` task is working
    cancel TASK_ID                             when the SDK calls its cancel

The bearer token it expects (if any) is read from the environment variable
named by --token-env, and never printed. Modes:

    upper    answers the text upper-cased, in the COMPLETED status message
    reverse  answers the text reversed, as an artifact
    fail     ends FAILED, its status message saying why (reason code
             `backend_down` in the message's metadata)
    reject   ends REJECTED, its status message saying why
    wait     stays WORKING until the task is canceled
"""

import argparse
import asyncio
import json
import os
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
)


def say(line):
    print(line, flush=True)


class TestExecutor(AgentExecutor):
    def __init__(self, mode):
        self.mode = mode

    async def execute(self, context: RequestContext, event_queue: EventQueue):
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        if self.mode == 'upper':
            await updater.complete(updater.new_agent_message([new_text_part(text.upper())]))
        elif self.mode == 'reverse':
            await updater.add_artifact([new_text_part(text[::-1])], name='answer')
            await updater.complete()
        elif self.mode == 'fail':
            await updater.failed(updater.new_agent_message(
                [new_text_part('the remote agent broke')], metadata={'reason': 'backend_down'}))
        elif self.mode == 'reject':
            await updater.reject(updater.new_agent_message([new_text_part('not my kind of question')]))
        elif self.mode == 'wait':
            say(f'working {task.id}')
            # Until the SDK cancels this coroutine (CancelTask).
            await asyncio.Event().wait()

    async def cancel(self, context: RequestContext, event_queue: EventQueue):
        say(f'cancel {context.task_id}')
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class BearerCheck(BaseHTTPMiddleware):
    """Reports whether each JSON-RPC call carried the expected bearer, and
    refuses it without."""

    def __init__(self, app, token):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request, call_next):
        if request.method != 'POST':
            return await call_next(request)
        body = await request.body()
        try:
            method = json.loads(body).get('method', '?')
        except ValueError:
            method = '?'
        header = request.headers.get('authorization')
        if header is None:
            seen = 'missing'
        elif self.token is not None and header == f'Bearer {self.token}':
            seen = 'ok'
        else:
            seen = 'wrong'
        say(f'request {method} bearer={seen}')
        if self.token is not None and seen != 'ok':
            return JSONResponse({'error': 'unauthorized'}, status_code=401)
        return await call_next(request)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--mode', required=True,
                        choices=['upper', 'reverse', 'fail', 'reject', 'wait'])
    parser.add_argument('--no-streaming', action='store_true')
    parser.add_argument('--token-env')
    args = parser.parse_args()
    token = os.environ.get(args.token_env) if args.token_env else None

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', 0))
    base = f'http://127.0.0.1:{sock.getsockname()[1]}'

    card = AgentCard(
        name=f'Test agent ({args.mode})',
        description='An outside agent for the tests.',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(url=f'{base}/rpc', protocol_binding='JSONRPC',
                           protocol_version='1.0'),
        ],
        capabilities=AgentCapabilities(streaming=not args.no_streaming),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id=args.mode, name=args.mode,
                           description=f'Answers in mode {args.mode}.',
                           tags=['test'])],
    )
    handler = DefaultRequestHandler(
        agent_executor=TestExecutor(args.mode),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, '/rpc')
    app = Starlette(routes=routes)
    app.add_middleware(BearerCheck, token=token)

    config = uvicorn.Config(app, log_level='warning')
    server = uvicorn.Server(config)
    say(f'listening {base}')
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == '__main__':
    sys.exit(main())
