"""Flags that cannot be read once a script has validated them.

`SealedSnapshot` is a FlagSnapshot whose every read raises AssertionError,
naming the flag, once `seal()` is called. tests/test_flag_reads.py
validates a script's flags from one, seals it and unparses FLAGS, then
lets the script do its work: a flag read anywhere after validation fails
the test.

Run as a script, it does that for eval_image_classifier.py (whose flags
cannot be defined in a process that defined the training script's):

  python tests/sealed_flags.py --dataset_name=digits ... (eval's flags)
"""

import sys

from training import run_config


class SealedSnapshot(run_config.FlagSnapshot):
  """A FlagSnapshot that raises on every read once sealed."""

  def seal(self):
    object.__setattr__(self, '_sealed', True)

  def _refuse_if_sealed(self, what):
    if self.__dict__.get('_sealed'):
      raise AssertionError('flag %s read after validation' % what)

  def __getattr__(self, name):
    if name.startswith('__'):  # copy and pickle ask for these
      raise AttributeError(name)
    self._refuse_if_sealed(name)
    return super().__getattr__(name)

  def given(self, name):
    self._refuse_if_sealed(name)
    return super().given(name)

  def names(self):
    self._refuse_if_sealed('names()')
    return super().names()


def evaluate_sealed(argv):
  """eval_image_classifier.py's work, its flags sealed after validation."""
  # pylint: disable=g-import-not-at-top
  import eval_image_classifier
  flag_values = eval_image_classifier.FLAGS
  flag_values(['eval_image_classifier.py'] + list(argv))
  snapshot = SealedSnapshot.of(flag_values)
  flag_values.unparse_flags()  # A read of FLAGS raises from here on.
  config = eval_image_classifier.eval_config(snapshot)
  snapshot.seal()
  eval_image_classifier.evaluate_and_report(config)


if __name__ == '__main__':
  evaluate_sealed(sys.argv[1:])
