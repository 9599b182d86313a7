"""Stand-in task scripts for the launcher's tests (no TensorFlow: fast)."""


def write_task(tmp_path, name, text):
  """Writes the script `text` as tmp_path/name, and the folder MARKS where
  it leaves files for the test; returns (script path, MARKS)."""
  path = tmp_path / name
  path.write_text(text)
  marks = tmp_path / 'marks'
  marks.mkdir()
  return str(path), marks
