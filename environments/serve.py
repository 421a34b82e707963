"""`python -m environments.serve`: starts the live endpoint (`environments.live`).

The command the README and operators use; the server, its Hydra config and the `keys` CLI live in
`environments.live.__main__` (which `python -m environments.live` runs too).
"""

from __future__ import annotations

from environments.live.__main__ import main

if __name__ == "__main__":
    main()
