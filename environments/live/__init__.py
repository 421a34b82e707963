"""The live endpoint: real customers consult the advisor over HTTP, behind the same gate.

`python -m environments.serve` starts it (`environments.serve.app.create_app` builds the app);
`python -m environments.serve keys create --owner NAME --scope customer` makes an API key.
"""
