"""TF-Slim on TensorFlow 2.21, the compatibility layer; imports no package of this project.

Every other package imports `tf` and `slim` from here:

    from tf2_compat.slim_compat import slim, tf

  * `slim_compat`: the TensorFlow internals tf-slim 1.1.0 still uses, put
    back (with `slim_loops` for its training loop and `slim_numpy2` for
    NumPy 2), and TensorFlow imported quietly (`quiet`).
  * `run_slim`: `python -m tf2_compat.run_slim SCRIPT.py` runs an existing
    Slim program unchanged; `contrib_stubs` (with `contrib_hparams`,
    `contrib_opt`, `contrib_data` and `contrib_tfprof`, the contrib pieces
    TF 2.x has no home for), `tf1_imports`, `program_tree` and
    `traced_errors` (the error a traced function raised, under
    autograph's) serve it.
  * `op_errors`: a TensorFlow op error cut to its reason, on one line.
  * `patching`: how the fixes wrap a library's functions in place and put
    them back.
"""
