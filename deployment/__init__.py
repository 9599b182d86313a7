"""Slim models over clones and replicas: the public API and its graph mechanics; imports tf2_compat.

  * `model_deploy` (with `deployment_config`): upstream Slim's API.
  * The graph mechanics it builds on: `device_placement`, `clone_losses`,
    `gradients`, `accumulation`, `apply_when`, `update`, `precision`,
    `collectives`, `sync_batch_norm`, `argument_checks`.

`slim_compat`, `run_slim`, `contrib_stubs` and `quiet` (now in
`tf2_compat`), `cluster` and `launch` (now in `clusters`) stay here as
re-exports of their old paths.
"""
