"""`python -m environments.serve keys ...`: create, list and revoke API keys.

The key itself is printed once, at creation; only its hash is stored. Hydra overrides after the
command pick the store, as for the server, e.g. `server.database_url=postgresql+psycopg://...`.
"""

from __future__ import annotations

import argparse
import json
import sys

from environments.config import ConfigError
from environments.live.config import compose_serve_config
from environments.live.keys import Scope
from environments.live.store import LiveStore
from simulacra.clock import SystemClock


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m environments.serve keys", description=__doc__)
    commands = p.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a key and print it (the only time it is shown)")
    create.add_argument("--owner", required=True, help="whose key: the customer, reviewer or admin name")
    create.add_argument("--scope", required=True, choices=[s.value for s in Scope])
    create.add_argument(
        "--rate-limit", type=int, default=None, help="requests per window (default: server's)"
    )
    commands.add_parser("list", help="list keys (ids, owners, scopes; never the keys)")
    revoke = commands.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    for sub in (create, commands.choices["list"], revoke):
        sub.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. server.database_url=...")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        config = compose_serve_config(args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = LiveStore(config.database_url(), SystemClock())
    try:
        if args.command == "create":
            try:
                issued = store.create_key(args.owner, Scope(args.scope), args.rate_limit)
            except ValueError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(json.dumps({"key": issued.key, **issued.record.model_dump(mode="json")}))
        elif args.command == "list":
            for record in store.list_keys():
                print(json.dumps(record.model_dump(mode="json")))
        elif not store.revoke_key(args.key_id):
            print(f"error: no active key {args.key_id}", file=sys.stderr)
            return 1
        else:
            print(json.dumps({"revoked": args.key_id}))
    finally:
        store.close()
    return 0
