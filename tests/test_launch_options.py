"""The launcher's numeric options: a value that is not finite or not in
range is refused with exit status 2, a message naming it and the fix,
before any task starts."""

import pytest

from clusters import launch

_TIMEOUT = ('timeout must be a finite number of seconds > 0, got %s; give '
            'the time the run may take, or no --timeout for no limit')
_GRACE = ('grace_secs must be a finite number of seconds >= 0, got %s; give '
          'the time a task has to save after SIGTERM, e.g. 10 (0: SIGKILL at '
          'once)')


@pytest.mark.parametrize('options,message', [
    *[(['--timeout', given], _TIMEOUT % shown) for given, shown in (
        ('nan', 'nan'), ('inf', 'inf'), ('-5', '-5.0'), ('0', '0.0'))],
    *[(['--grace_secs', given], _GRACE % shown) for given, shown in (
        ('-5', '-5.0'), ('nan', 'nan'), ('inf', 'inf'))],
    (['--intra_op_threads', '0'], 'intra_op_threads must be >= 1, got 0; '
                                  'give 1 or more, or no --intra_op_threads '
                                  'to let TensorFlow decide'),
    (['--inter_op_threads', '-2'], 'inter_op_threads must be >= 1, got -2; '
                                   'give 1 or more, or no --inter_op_threads '
                                   'to let TensorFlow decide'),
    (['--ps_restarts', '-1'], 'ps_restarts must be >= 0, got -1; give 0 (a '
                              'dead ps task stops the cluster) or more'),
    (['--task_memory_mib', '-1'], 'task_memory_mib must be >= 0, got -1'),
    (['--num_workers', '0'], 'num_workers must be >= 1, got 0'),
])
def test_a_bad_number_exits_2_before_any_task_starts(options, message,
                                                     capsys):
  assert launch.main(options + ['--', 'x.py']) == 2
  # Nothing on stdout: no task was started.
  assert capsys.readouterr() == ('', 'error: %s\n' % message)


def test_a_count_that_is_not_a_whole_number_is_a_usage_error(capsys):
  with pytest.raises(SystemExit) as exit_info:
    launch.parse_args(['--max_restarts', '1e20', '--', 'x.py'])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err.endswith(
      "error: argument --max_restarts: invalid int value: '1e20'\n")
