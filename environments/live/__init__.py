"""The live endpoint: real customers consult the advisor over HTTP, behind the same gate.

`python -m environments.serve` starts it (`environments.live.app.create_app` builds the app);
`python -m environments.serve keys create --owner NAME --scope customer` makes an API key.
"""

from pathlib import Path

# The Hydra config tree, as an absolute path so that Hydra finds it whichever module starts the
# server (`environments.serve` or `environments.live`): a relative config_path is resolved
# against the starting module's package. Here, not in `config`, so that starting a server
# process imports nothing heavy before it can answer its supervisor's health checks.
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
