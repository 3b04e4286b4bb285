"""The payment provider's HTTP API, as monthly billing uses it: one charge per invoice.

Every charge carries the invoice's number as its `Idempotency-Key`, so a charge sent twice
(a retried batch, a stale attempt waking up) is answered with the first charge's outcome
and never charges the customer again. The API is the common shape of card processors:

    POST {PAYMENTS_URL}/v1/charges   Idempotency-Key: SUB-202611-00000042
    {"amount": 1900, "currency": "usd", "payment_method": "pm_...", "reference": "SUB-..."}
    200 {"id": "ch_...", "status": "succeeded"}
    402 {"error": {"code": "card_declined", "decline_code": "insufficient_funds"}}

    GET {PAYMENTS_URL}/v1/charges?reference=SUB-202611-00000042
    200 {"data": [{"id": "ch_...", "status": "succeeded", "reference": "SUB-..."}]}

A request whose answer never arrived may or may not have charged the customer: it is sent
again with the same key, or, when a run is being undone, looked up by its reference.

Errors name the invoice and the status, never the URL or the API key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx


class ProviderUnavailable(Exception):
    """The provider did not answer, or answered that it cannot now: try again later.

    `charged_maybe`: the request may have been processed (no answer arrived, or the answer
    does not say); False when this request certainly was not (refused before processing,
    never sent). It says nothing about an earlier request with the same key: a charge sent
    before and not answered may have been made whatever its re-send meets.
    """

    def __init__(self, message: str, *, charged_maybe: bool) -> None:
        super().__init__(message)
        self.charged_maybe = charged_maybe


class ProviderRefused(Exception):
    """The provider refused the request itself (bad key, bad request): retrying won't help."""


@dataclass(frozen=True)
class Charge:
    """One invoice to charge."""

    invoice_id: int
    invoice_number: str
    amount_cents: int
    currency: str
    payment_method: str


@dataclass(frozen=True)
class Outcome:
    """What the provider answered for one charge."""

    invoice_id: int
    status: Literal["charged", "declined"]
    amount_cents: int
    charge_id: str | None = None
    decline_code: str | None = None


# Answers worth another try: a request still in flight at the provider, rate limiting,
# and the provider's own trouble. Of those, these say the charge was not processed.
_TRANSIENT = {409, 423, 425, 429, 500, 502, 503, 504}
_NOT_PROCESSED = {423, 425, 429, 503}


class PaymentProvider:
    """An HTTP client for the charges API; use as an async context manager."""

    def __init__(self, base_url: str, api_key: str | None, timeout_seconds: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_seconds
        )

    async def __aenter__(self) -> PaymentProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def charge(self, charge: Charge) -> Outcome:
        """Charge one invoice, once whatever happens (its number is the idempotency key).

        Raises:
            ProviderUnavailable: no answer, or an answer that says to try again later.
            ProviderRefused: the provider refused the request; fix the setup, not the run.
        """
        try:
            response = await self._client.post(
                "/v1/charges",
                headers={"Idempotency-Key": charge.invoice_number},
                json={
                    "amount": charge.amount_cents,
                    "currency": charge.currency.lower(),
                    "payment_method": charge.payment_method,
                    "reference": charge.invoice_number,
                },
            )
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(
                f"payment provider did not answer for invoice {charge.invoice_number}: "
                f"{type(exc).__name__}",
                charged_maybe=not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)),
            ) from None
        status = response.status_code
        if status in (200, 201):
            body = _json(response)
            return Outcome(charge.invoice_id, "charged", charge.amount_cents, str(body.get("id")))
        if status == 402:
            error = _json(response).get("error") or {}
            code = error.get("decline_code") or error.get("code") or "declined"
            return Outcome(charge.invoice_id, "declined", charge.amount_cents, None, str(code))
        if status in _TRANSIENT:
            raise ProviderUnavailable(
                f"payment provider answered {status} for invoice {charge.invoice_number}",
                charged_maybe=status not in _NOT_PROCESSED,
            )
        raise ProviderRefused(
            f"payment provider refused the charge of invoice {charge.invoice_number} with "
            f"{status}; check PAYMENTS_URL and PAYMENTS_API_KEY"
        )

    async def lookup(self, charge: Charge) -> Outcome | None:
        """What became of an earlier request for `charge` (by its reference, the invoice
        number): its outcome, or None if the provider made no charge for it.

        Raises:
            ProviderUnavailable: the provider cannot say now.
            ProviderRefused: the provider refused the request itself.
        """
        try:
            response = await self._client.get(
                "/v1/charges", params={"reference": charge.invoice_number}
            )
        except httpx.HTTPError as exc:
            raise ProviderUnavailable(
                f"payment provider did not answer the lookup of invoice "
                f"{charge.invoice_number}: {type(exc).__name__}",
                charged_maybe=True,
            ) from None
        if response.status_code in _TRANSIENT:
            raise ProviderUnavailable(
                f"payment provider answered {response.status_code} to the lookup of invoice "
                f"{charge.invoice_number}",
                charged_maybe=True,
            )
        if response.status_code != 200:
            raise ProviderRefused(
                f"payment provider refused the lookup of invoice {charge.invoice_number} with "
                f"{response.status_code}; check PAYMENTS_URL and PAYMENTS_API_KEY"
            )
        found = _json(response).get("data") or []
        made = [c for c in found if isinstance(c, dict)]
        if not made:
            return None
        first = made[0]
        if first.get("status") == "succeeded":
            return Outcome(charge.invoice_id, "charged", charge.amount_cents, str(first.get("id")))
        code = str(first.get("decline_code") or "declined")
        return Outcome(charge.invoice_id, "declined", charge.amount_cents, None, code)


def _json(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
