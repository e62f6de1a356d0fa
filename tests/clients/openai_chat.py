"""Chat completions against trident with OpenAI's own `openai` client (PyPI), which shares no
code with the server. Given a base url ending in `/v1` (`http://127.0.0.1:PORT/v1` or
`.../openai/v1`), the client is pointed straight at it, as a user would. Given only the server's
address, its requests go to /invocations, where SageMaker delivers every call (a request hook on
the client's own HTTP client rewrites the path; nothing else about them changes).

Usage: python openai_chat.py http://127.0.0.1:PORT[/v1|/openai/v1] < requests.json
requests.json: a list of keyword arguments for `client.chat.completions.create`.
Prints a JSON list, one entry per request: for an answer, `content`, `finish_reason`, `id`,
`object`, `model`, `usage`; for a stream, `deltas` (each chunk's content), `roles`, `ids`,
`objects`, `finish_reason`; for a refusal, `status` and `error`.
"""

import json
import sys

import openai


def to_invocations(request):
    request.url = request.url.copy_with(path="/invocations")


def main():
    if sys.argv[1].endswith("/v1"):
        http, base_url = openai.DefaultHttpxClient(timeout=30), sys.argv[1]
    else:
        hooks = {"request": [to_invocations]}
        http, base_url = openai.DefaultHttpxClient(event_hooks=hooks, timeout=30), sys.argv[1] + "/v1"
    client = openai.OpenAI(base_url=base_url, api_key="unused", http_client=http, max_retries=0)
    results = []
    for arguments in json.load(sys.stdin):
        try:
            if arguments.get("stream"):
                deltas, roles, ids, objects, finish = [], [], set(), set(), None
                for chunk in client.chat.completions.create(**arguments):
                    ids.add(chunk.id)
                    objects.add(chunk.object)
                    choice = chunk.choices[0]
                    if choice.delta.role:
                        roles.append(choice.delta.role)
                    if choice.delta.content is not None:
                        deltas.append(choice.delta.content)
                    if choice.finish_reason:
                        finish = choice.finish_reason
                results.append({"deltas": deltas, "roles": roles, "ids": sorted(ids),
                                "objects": sorted(objects), "finish_reason": finish})
            else:
                answer = client.chat.completions.create(**arguments)
                results.append({
                    "content": answer.choices[0].message.content,
                    "role": answer.choices[0].message.role,
                    "finish_reason": answer.choices[0].finish_reason,
                    "id": answer.id,
                    "object": answer.object,
                    "model": answer.model,
                    "usage": answer.usage.model_dump() if answer.usage else None,
                })
        except openai.APIStatusError as error:
            results.append({"status": error.status_code, "error": str(error.body)})
        except openai.APIError as error:
            results.append({"stream_error": str(error)})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
