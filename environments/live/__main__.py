"""`python -m environments.serve`: the live endpoint; `python -m environments.serve keys ...`: API keys.

Hydra-configured like training runs (`conf/serve.yaml`), e.g.
`python -m environments.serve server.port=8080 llm=openai validator=production_multivendor`.
With no arguments it serves offline on 127.0.0.1:8000 with the scripted model and production
validation.
"""

from __future__ import annotations

import logging
import sys

import hydra
import uvicorn
from omegaconf import DictConfig

from environments.config import ConfigError
from environments.serve.config import load_serve_config
from simulacra.llm.errors import ConfigurationError


@hydra.main(config_path="../../conf", config_name="serve", version_base=None)
def serve(cfg: DictConfig) -> None:
    try:
        config = load_serve_config(cfg)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    from environments.serve.app import create_app

    logging.getLogger("environments.serve").setLevel(config.server.log_level.upper())
    try:
        uvicorn.run(
            create_app(config),
            host=config.server.host,
            port=config.server.port,
            log_level=config.server.log_level,
            timeout_graceful_shutdown=5,
        )
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "keys":
        from environments.serve.cli_keys import main as keys

        sys.exit(keys(sys.argv[2:]))
    serve()


if __name__ == "__main__":
    main()
