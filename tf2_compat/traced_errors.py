"""The error a traced function raised, under the one autograph raises for it.

When a function that TensorFlow traces (a `dataset.map` function, a
`tf.function`) raises, autograph raises another error in its place: the
same type with a message of 20 lines and more ("in user code:", the
function's frames, the error), or a StagingError where it cannot build that
type (contrib_stubs.RemovedInTF2Error). The error raised in the function is
the other's `__context__`, and the function's frames, mapped back from the
code autograph generated to the program's source, are on its
`ag_error_metadata.translated_stack`, innermost first.

Checked on TensorFlow 2.21 (tensorflow/python/autograph/impl/api.py and
pyct/error_utils.py). Should autograph keep its metadata otherwise, reading
`translated_stack` fails with an AttributeError, not silently.
"""

import traceback


def _metadata(error):
  return getattr(error, 'ag_error_metadata', None)


def raised(error):
  """The error the traced code raised, where autograph raised `error` for
  it; else `error`."""
  while (_metadata(error) is not None and error.__suppress_context__
         and _metadata(error.__context__) is not None):
    error = error.__context__
  return error


def frames(error):
  """(file, line) of each frame `error` passed, outermost first, with a
  traced function's frames where they are in the program's source."""
  passed = [(frame.filename, frame.lineno)
            for frame in traceback.extract_tb(error.__traceback__)]
  metadata = _metadata(error)
  if metadata is not None:
    passed += [(frame.filename, frame.lineno)
               for frame in reversed(metadata.translated_stack)]
  return passed
