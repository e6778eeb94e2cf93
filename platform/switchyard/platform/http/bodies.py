"""How a JSON request body is read: as exactly what the OpenAPI document says it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar._signature.types import ExtendedMsgSpecValidationError
from litestar.plugins.pydantic import PydanticInitPlugin
from litestar.plugins.pydantic.plugins.init import is_pydantic_v2_model_class
from pydantic import BaseModel, ConfigDict, ValidationError

from switchyard.platform.http.errors import InvalidRequest

__all__ = ["MAX_STORED_INTEGER", "REQUEST_BODY", "ValidateAsDeclared", "stored_integer"]

MAX_STORED_INTEGER = 2**31 - 1
"""The largest number an integer column holds on every database (PostgreSQL's ``integer``): a version, a sequence
number or a position a tenant names is at most this, or PostgreSQL refuses the query (and SQLite's driver refuses
anything past 64 bits)."""

REQUEST_BODY = ConfigDict(extra="forbid", strict=True)
"""The ``model_config`` of a request body. An unknown field is refused (``additionalProperties: false``), and a value
keeps its JSON type: pydantic's default lax mode would take ``"yes"`` or ``1`` for ``true`` and ``"7"`` or ``true``
for ``7``, none of which the document allows. Enum and time fields say ``Field(strict=False)``: JSON sends them as
strings."""

Decoder = tuple[Callable[[Any], bool], Callable[[Any, Any], Any]]


def stored_integer(text: str, *, param: str, minimum: int = 1, maximum: int = MAX_STORED_INTEGER) -> int:
    """``text`` as a whole number from ``minimum`` to ``maximum`` (by default what a column holds); anything else (a
    sign, blanks, digits other than ASCII's such as ``²`` or ``٣``, thousands of digits, which ``int()`` refuses
    past 4,300) is a 400 naming ``param``."""
    if text.isascii() and text.isdigit() and len(text) <= len(str(maximum)):
        number = int(text)
        if minimum <= number <= maximum:
            return number
    raise InvalidRequest(f"{param} is a whole number from {minimum} to {maximum}", param=param, code="invalid_value")


def _integral(value: Any) -> Any:
    """JSON numbers are values: ``7.0`` is the integer 7 (as JSON Schema has it), which strict validation refuses."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _validate(model: type[BaseModel], value: Any) -> BaseModel:
    try:
        return model.model_validate(_integral(value))
    except ValidationError as exc:
        hide_input = model.model_config.get("hide_input_in_errors", False)
        errors = [dict(error) for error in exc.errors(include_input=not hide_input)]
        raise ExtendedMsgSpecValidationError(errors=errors) from exc


class ValidateAsDeclared(PydanticInitPlugin):
    """Litestar's pydantic support, validating each body by its model's own ``model_config``.

    Litestar passes ``strict=`` to every validation, which overrides the models' settings: ``False`` (its default)
    makes :data:`REQUEST_BODY` lax again, ``True`` also refuses enums and times sent as JSON strings.
    """

    @classmethod
    def decoders(cls, validate_strict: bool = False) -> list[Decoder]:
        others = super().decoders(validate_strict)
        return [(is_pydantic_v2_model_class, _validate), *(d for d in others if d[0] is not is_pydantic_v2_model_class)]
