"""Measures what a shaped link carries: TCP transfers between hosts of a
netns.Network, timed by the receiver.

  with netns.Network(2, rate_bits=10**9) as network:
    bits_per_sec = link_check.payload_rate(network, senders=[0], receiver=1,
                                           bytes_each=50 * 2**20)

The rate is of the payload, from the receiver's first byte to the end of the
last transfer. On Ethernet with 1500-byte packets a shaped rate carries
about 95.7% of it as TCP payload (1448 of every 1514 bytes); the rest is
headers, which the shaper counts.

The receiving and sending ends are this file run as a script inside the
namespaces:

  python link_check.py receive PORT CONNECTIONS  # prints 'listening', then
                                                 # 'BYTES SECONDS'
  python link_check.py send ADDRESS PORT BYTES
"""

import os
import socket
import subprocess
import sys
import threading
import time

PORT = 5001
_CHUNK = 1 << 20


def receive(port, connections):
  """Accepts `connections` senders and reads each to its end; prints the
  bytes received and the seconds from the first byte to the last."""
  listener = socket.create_server(('0.0.0.0', port), backlog=connections)
  print('listening', flush=True)
  times, counts, lock = [], [], threading.Lock()

  def drain(conn):
    buffer = bytearray(_CHUNK)
    received, first = 0, None
    with conn:
      while True:
        got = conn.recv_into(buffer)
        if not got:
          break
        if first is None:
          first = time.monotonic()
        received += got
    with lock:
      counts.append(received)
      times.extend([first or time.monotonic(), time.monotonic()])

  readers = []
  for _ in range(connections):
    conn, _ = listener.accept()
    readers.append(threading.Thread(target=drain, args=(conn,)))
    readers[-1].start()
  for reader in readers:
    reader.join()
  print('%d %.6f' % (sum(counts), max(times) - min(times)), flush=True)


def send(address, port, num_bytes):
  """Sends `num_bytes` to `address`:`port`, then closes the connection."""
  chunk = memoryview(b'\0' * _CHUNK)
  with socket.create_connection((address, port), timeout=60) as conn:
    left = num_bytes
    while left > 0:
      conn.sendall(chunk[:min(left, _CHUNK)])
      left -= _CHUNK


def payload_rate(network, senders, receiver, bytes_each, timeout=120):
  """Bits per second of payload that host `receiver` got from `senders`
  (host indices), each sending `bytes_each` at the same time.

  Raises:
    RuntimeError: a transfer failed or took longer than `timeout` seconds.
  """
  script = [sys.executable, os.path.abspath(__file__)]
  server = subprocess.Popen(
      network.command(receiver, script + ['receive', str(PORT),
                                          str(len(senders))]),
      stdout=subprocess.PIPE, text=True)
  clients = []
  try:
    if server.stdout.readline().strip() != 'listening':
      raise RuntimeError('the receiver in %s did not start'
                         % network.hosts[receiver])
    clients = [subprocess.Popen(network.command(sender, script + [
        'send', network.addresses[receiver], str(PORT), str(bytes_each)]))
               for sender in senders]
    for client in clients:
      if client.wait(timeout=timeout) != 0:
        raise RuntimeError('a sender failed with exit status %d'
                           % client.returncode)
    output, _ = server.communicate(timeout=timeout)
    received, seconds = output.split()
  except subprocess.TimeoutExpired:
    raise RuntimeError('the transfer took more than %d s' % timeout) from None
  finally:
    for process in clients + [server]:
      if process.poll() is None:
        process.kill()
        process.wait()
  return int(received) * 8 / float(seconds)


if __name__ == '__main__':
  if sys.argv[1] == 'receive':
    receive(int(sys.argv[2]), int(sys.argv[3]))
  else:
    send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
