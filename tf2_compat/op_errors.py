"""TensorFlow's op error text cut to what a user needs: the reason, on one line.

TensorFlow's text of an op error raised by a session run is "Graph
execution error:", then, when it can show one, the Python stack that built
the op (30 lines and more) and the op's name, then the reason, and the op
again in [[...]]. Only the reason is for the user.

    op_error_reason(e)   # 'corrupted record at 12'
"""

import re

_GRAPH_EXECUTION_ERROR = re.compile(
    r"Graph execution error:\s*(?:Detected at node.*?\nNode: '[^'\n]*'\n)?"
    r"(.*?)\n\s*\[\[[^\n]*\]\]", re.DOTALL)


def without_op_stacks(text):
  """`text` with each TensorFlow "Graph execution error" cut to its reason:
  'corrupted record at 12' instead of 30 lines of stack around it."""
  return _GRAPH_EXECUTION_ERROR.sub(lambda m: m.group(1).strip(), text)


def one_line(text):
  """`text` on one line: TensorFlow's op stacks cut (without_op_stacks), its
  [[node]] lines dropped, the other lines joined."""
  lines = [line.strip() for line in without_op_stacks(text).splitlines()
           if line.strip() and not line.strip().startswith('[[')]
  return ' '.join(lines)


def op_error_reason(error):
  """What a TensorFlow error (or any exception) says went wrong, on one
  line."""
  text = getattr(error, 'message', None) or str(error)
  return one_line(text) or type(error).__name__
