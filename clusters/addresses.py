"""A task's 'host:port' address: checked, split, and probed over TCP.

One home for what the cluster description (a valid address), the servers
(the port to listen on) and the probes of other tasks (where to connect)
read from an address.
"""

import socket


def split_address(address):
  """The (host, port) of a 'host:port' address.

  An IPv6 host loses its brackets: '[::1]:2222' -> ('::1', 2222).

  Raises:
    ValueError: `address` is not a string 'host:port' with a port in
      1..65535.
  """
  if not isinstance(address, str):
    raise ValueError('address %r is not a string "host:port"' % (address,))
  host, colon, port = address.rpartition(':')
  if not colon or not host or not port.isdigit() or not (
      0 < int(port) < 65536):
    raise ValueError('address %r is not "host:port" with a port in 1..65535'
                     % (address,))
  return host.strip('[]'), int(port)


# Why a connection failed when nothing listens at the address.
REFUSED = 'connection refused'


def open_connection(address, timeout_secs):
  """Opens a TCP connection to `address`, or says why it cannot.

  Args:
    address: 'host:port'.
    timeout_secs: how long to wait for the connection.

  Returns:
    (socket, None) when the connection opened (the caller closes it), else
    (None, why not in words), e.g. (None, 'connection refused').
  """
  host, port = split_address(address)
  try:
    return socket.create_connection((host, port), timeout=timeout_secs), None
  except ConnectionRefusedError:
    return None, REFUSED
  except socket.gaierror as e:
    return None, 'cannot resolve the host name %s (%s)' % (host, e.strerror)
  except socket.timeout:
    return None, 'no reply to a connection within %g s' % timeout_secs
  except OSError as e:
    return None, 'cannot connect (%s)' % (e.strerror or e)


def accepts_connections(address, timeout_secs):
  """Whether a TCP connection to `address` opens within `timeout_secs`."""
  connection, _ = open_connection(address, timeout_secs)
  if connection is None:
    return False
  connection.close()
  return True
