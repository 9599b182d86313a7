"""Flag values the benchmarks share: lists of numbers, wire dtypes."""

WIRE_DTYPES = ('float32', 'float16', 'bfloat16')


def positive_numbers(parser, flag, text):
  """The numbers of the comma-separated `text` given to `flag`; any that is
  not a number, or not > 0, ends the program with parser.error."""
  try:
    numbers = [float(number) for number in text.split(',')]
  except ValueError:
    parser.error('%s: %r is not a list of numbers' % (flag, text))
  if min(numbers) <= 0:
    parser.error('%s: every value must be > 0, got %r' % (flag, text))
  return numbers


def wire_dtypes(parser, text):
  """The dtypes of the comma-separated --wire_dtypes `text`."""
  dtypes = text.split(',')
  unknown = set(dtypes) - set(WIRE_DTYPES)
  if unknown:
    parser.error('--wire_dtypes: %s unknown; use %s' % (
        ', '.join(sorted(unknown)), ', '.join(WIRE_DTYPES)))
  return dtypes
