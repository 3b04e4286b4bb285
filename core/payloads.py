"""The data converter of every client and worker of the project: Temporal's pydantic
converter, with a model's fields at their default values left out of its JSON.

A run's inputs and results are written into its history, stored by the server and sent
back with each of its workflow tasks: a field left at its default (a `None`, an empty
list, a policy as the model has it) is bytes every run pays for and nothing reads. Left
out, the model's default fills it in when the payload is read, by this release or an
older one, so a payload written either way reads the same.

That makes a payload model's defaults part of every history written without them: a
default must never change (add a field instead). `tests/unit/test_payload_defaults.py`
holds each model's defaults and fails when one changes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """`json/plain`, as Temporal's pydantic converter writes it, a model without the
    fields at their defaults; any other value as that converter writes it."""

    def to_payload(self, value: Any) -> Payload | None:
        if not isinstance(value, BaseModel):
            return super().to_payload(value)
        data = value.__pydantic_serializer__.to_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


class CompactPayloadConverter(CompositePayloadConverter):
    """Temporal's default converters, its JSON one replaced by `CompactJSONPayloadConverter`
    (as `temporalio.contrib.pydantic.PydanticPayloadConverter` replaces it)."""

    def __init__(self) -> None:
        compact = CompactJSONPayloadConverter()
        super().__init__(
            *(
                compact if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


data_converter = DataConverter(payload_converter_class=CompactPayloadConverter)
