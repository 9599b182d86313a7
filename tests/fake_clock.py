"""A stand-in for the `time` module: time passes only when a test says so."""


class FakeClock:
  """Has the `time`, `monotonic` and `sleep` of the time module.

  Sleeping moves the clock and is recorded in `sleeps`; `advance` moves it
  as the work between two calls would.
  """

  def __init__(self, start=1000.0):
    self.now = start
    self.sleeps = []

  def time(self):
    return self.now

  def monotonic(self):
    return self.now

  def sleep(self, seconds):
    self.sleeps.append(seconds)
    self.now += seconds

  def advance(self, seconds):
    self.now += seconds
