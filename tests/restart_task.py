"""A stand-in cluster task for the launcher's restarts (no TensorFlow).

  python tests/restart_task.py MODE MARKS --train_dir=DIR [--sync_replicas]

Every start of a task leaves the file MARKS/<task>.<n>, n = 0 first, and
prints '<task> start <n> on <address>'. Each task listens on its TF_CONFIG
address; a worker first connects to every ps task. Then MODE decides:

  dies_once: the chief logs steps 5 and 7 with the checkpoint of step 3
    between them, as train_image_classifier.py would; worker1 then kills
    itself with SIGKILL. Without ps tasks the chief, connected to worker1
    as an all-reduce is, exits 1 when that connection drops (SIGTERM or
    not); with ps tasks
    it goes on until worker1 has started again. At their next start the
    workers print 'done' and exit 0.
  chief_dies_once: the chief logs those steps and writes that checkpoint,
    then kills itself with SIGKILL; the other workers go on until it has
    started again.
  always_fails: worker1 exits 3 at every start, the other workers hang.
  bad_input: worker1 exits 2, the other workers hang.

A ps task serves until SIGTERM, which it turns into exit status 0.
"""

import json
import os
import signal
import socket
import sys
import time

CHECKPOINT_STEP, LOGGED_STEPS = 3, (5, 7)


def _connect(address, deadline_secs=30):
  host, port = address.rsplit(':', 1)
  deadline = time.monotonic() + deadline_secs
  while True:
    try:
      return socket.create_connection((host, int(port)), timeout=1)
    except OSError:
      if time.monotonic() > deadline:
        sys.exit('nothing listens at %s' % address)
      time.sleep(0.05)


def _wait_for(path):
  while not os.path.exists(path):
    time.sleep(0.05)


def _log_training(train_dir):
  """Logs the steps and writes the checkpoint index of a chief."""
  print('INFO:tensorflow:step %d: loss = 1.0' % LOGGED_STEPS[0])
  os.makedirs(train_dir, exist_ok=True)
  with open(os.path.join(train_dir, 'checkpoint'), 'w') as index:
    index.write('model_checkpoint_path: "model.ckpt-%d"\n' % CHECKPOINT_STEP)
  print('INFO:tensorflow:step %d: loss = 1.0' % LOGGED_STEPS[1], flush=True)


def _train_then_lose_worker1(config, marks, train_dir):
  """The chief's first start in dies_once."""
  _log_training(train_dir)
  peer = _connect(config['cluster']['worker'][1])
  open(os.path.join(marks, 'trained'), 'w').close()
  if config['cluster']['ps']:  # Asynchronous: goes on without worker1.
    _wait_for(os.path.join(marks, 'worker1.1'))
    return
  peer.settimeout(None)
  # Ends on the dropped connection whether or not the launcher's SIGTERM
  # came first, so that the launcher always sees this second failure.
  signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
  try:
    peer.recv(1)  # Nothing is ever sent: returns, or raises, when it dies.
  except OSError:
    pass
  # The training script takes seconds to name the peer that stopped; this
  # second keeps worker1's death the first exit the launcher sees.
  time.sleep(1)
  sys.exit('worker 1 stopped: the all-reduce failed')


def main(mode, marks, train_dir):
  config = json.loads(os.environ['TF_CONFIG'])
  job, index = config['task']['type'], config['task']['index']
  name = '%s%d' % (job, index)
  start = len([f for f in os.listdir(marks) if f.startswith(name + '.')])
  open(os.path.join(marks, '%s.%d' % (name, start)), 'w').close()
  host, port = config['cluster'][job][index].rsplit(':', 1)
  if job == 'ps':
    signal.signal(signal.SIGTERM, lambda *unused: sys.exit(0))
  server = socket.create_server((host, int(port)))
  if job == 'worker':
    for address in config['cluster']['ps']:
      _connect(address).close()
  print('%s start %d on %s:%d' % ((name, start) + server.getsockname()),
        flush=True)
  if job == 'ps':
    while True:
      time.sleep(0.05)
  if mode in ('always_fails', 'bad_input') and index == 1:
    sys.exit(3 if mode == 'always_fails' else 2)
  if mode == 'dies_once' and start == 0 and index == 1:
    _wait_for(os.path.join(marks, 'trained'))
    os.kill(os.getpid(), signal.SIGKILL)
  if mode == 'dies_once' and start == 0 and index == 0:
    _train_then_lose_worker1(config, marks, train_dir)
  if mode == 'chief_dies_once' and start == 0:
    if index == 0:
      _log_training(train_dir)
      os.kill(os.getpid(), signal.SIGKILL)
    _wait_for(os.path.join(marks, 'worker0.1'))
  if mode not in ('dies_once', 'chief_dies_once'):
    time.sleep(600)
  print('done')


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2], sys.argv[3].split('--train_dir=', 1)[1])
