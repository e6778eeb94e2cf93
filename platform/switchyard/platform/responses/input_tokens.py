"""``POST /v1/responses/input_tokens``: how many input tokens a response to these fields would be admitted with.

The count is admission's own estimate: the request is prepared exactly as ``POST /v1/responses`` prepares it (its
history, input items, instructions and model checked, each refusal the same 400/404) and the answer is the prompt
tokens its first model call would hold. Nothing is admitted, stored or billed.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post
from litestar.params import JSONBody

from switchyard.platform.auth import Role, access, require_access
from switchyard.platform.deps import CurrentPrincipal
from switchyard.platform.http.errors import NotFound
from switchyard.platform.responses import service
from switchyard.platform.responses.schemas import InputTokensCount, ResponseCreate

__all__ = ["InputTokensController"]


class InputTokensController(Controller):
    path = "/v1/responses/input_tokens"
    tags = ["Responses"]
    guards = [require_access]

    @post(opt=access(Role.DEVELOPER), summary="Count a response's input tokens", status_code=200, raises=[NotFound])
    async def count_input_tokens(
        self, request: Request[Any, Any, Any], principal: CurrentPrincipal, data: JSONBody[InputTokensCount]
    ) -> dict[str, Any]:
        """The input tokens a response with these fields would be admitted with (OpenAI's
        `responses.input_tokens.count`): its instructions, its history and its input, counted as admission counts
        them. Refused as `POST /v1/responses` would refuse the same fields; nothing is run or billed."""
        scope = principal.scope
        assert scope is not None  # the route's guard admits tenant keys only
        state = request.app.state
        response = ResponseCreate.model_validate(data.as_response())
        async with state.database.unit_of_work(scope) as session:
            prepared, _ = await service.prepare(
                session,
                scope=scope,
                data=response,
                pool=state.gateway.pool,
                max_output_tokens=state.settings.max_output_tokens,
            )
        assert prepared.call is not None  # a prepared response always has its first call
        return {"object": "response.input_tokens", "input_tokens": prepared.call.prompt_tokens}
