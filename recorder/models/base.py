"""The base of every public model: camelCase on the wire, snake_case in Python, frozen."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

JSONObject = dict[str, Any]


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        frozen=True,
    )

    def to_json(self) -> JSONObject:
        """The model as the API sends it (camelCase, JSON values only)."""
        data: JSONObject = self.model_dump(mode="json", by_alias=True)
        return data
