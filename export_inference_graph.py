"""Exports a network: its inference GraphDef, a SavedModel, a TFLite file.

Upstream Slim's flags; --checkpoint_path freezes the trained weights into
the GraphDef (upstream's separate freeze_graph step):

  python export_inference_graph.py --model_name=lenet --dataset_name=digits \
      --checkpoint_path=train_dir/digits_lenet --output_file=lenet.pb

prints the input and output tensors (`input:0`, the net's Predictions).
With the same checkpoint, --saved_model_dir=DIR writes DIR/1/ for
TensorFlow Serving, and --tflite_file=F (--tflite_quantization=none,
float16 or int8; int8 also needs --dataset_dir, for the calibration
images) a TFLite model. Upstream's --final_endpoint=NAME ends the graph
at that end point of the net; --is_video_model --num_frames=N exports a
video network (i3d, s3dg) taking clips [batch, N, size, size, 3].
docs/export.md has the details; every artifact of a whole net evaluates
with eval_image_classifier.py --exported_model.

Bad flags, a checkpoint of another model or an output path that exists
exit 2 with 'error:' lines, before anything is written. So does a full or
read-only disk, with one line naming the artifact it refused; nothing of
that artifact is left.
"""

from exporting import config as config_lib
from exporting import export as export_lib
from exporting import flags as export_flags
from training import cli

FLAGS = export_flags.FLAGS


def main(unused_argv):
  def body():
    for line in export_lib.export(config_lib.export_config(FLAGS)):
      print(line)
  cli.run_main(body)


if __name__ == '__main__':
  cli.run_app(main)
