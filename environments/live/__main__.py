"""`python -m environments.serve` (or `environments.live`): the live endpoint; `... keys ...`: API keys.

Hydra-configured like training runs (`conf/serve.yaml`), e.g.
`python -m environments.serve server.port=8080 llm=openai validator=production_multivendor`.
With no arguments it serves offline on 127.0.0.1:8000 with the scripted model and production
validation, in one process (`server.workers=N` for N processes sharing the port).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig

from environments.live import CONF_DIR

if TYPE_CHECKING:
    from environments.live.config import ServerConfig

WORKER_HEALTHCHECK_S = 60

# Worker processes (`server.workers` > 1) are spawned and import this module again before they
# answer their supervisor's health checks, so the heavy imports happen inside `serve`.


def uvicorn_options(server: ServerConfig) -> dict[str, Any]:
    """What uvicorn is told, whatever the number of processes."""
    return {
        "host": server.host,
        "port": server.port,
        "log_level": server.log_level,
        # Access lines are logged at info: above that level uvicorn would still build each
        # one (the client's address and the request line) only for the logger to drop it.
        "access_log": server.log_level in ("debug", "info"),
        "timeout_graceful_shutdown": 5,
    }


@hydra.main(config_path=str(CONF_DIR), config_name="serve", version_base=None)
def serve(cfg: DictConfig) -> None:
    import uvicorn

    from environments.config import ConfigError
    from environments.live.config import load_serve_config
    from simulacra.llm.errors import ConfigurationError

    try:
        config = load_serve_config(cfg)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    from environments.live.app import CONFIG_ENV, create_app

    logging.getLogger("environments.live").setLevel(config.server.log_level.upper())
    options = uvicorn_options(config.server)
    try:
        if config.server.workers == 1:
            uvicorn.run(create_app(config), **options)
        else:
            # Worker processes import the app by name and build it from the config passed down
            # to them in the environment (they are spawned, so they share nothing in memory).
            os.environ[CONFIG_ENV] = config.model_dump_json()
            uvicorn.run(
                "environments.live.app:app_from_environment",
                factory=True,
                workers=config.server.workers,
                # A worker answers health checks once it has imported the app's modules, which
                # takes seconds on a busy machine; uvicorn's 5 s default would kill it mid-start.
                timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
                **options,
            )
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "keys":
        from environments.live.cli_keys import main as keys

        sys.exit(keys(sys.argv[2:]))
    serve()


if __name__ == "__main__":
    main()
