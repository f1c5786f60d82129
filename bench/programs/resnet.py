"""A small ResNet (stem conv-BN-ReLU, two basic blocks with BatchNorm, global pool, linear) on
random 3x16x16 images in batches of 16, SGD with momentum and weight decay."""
import _program
import models

if __name__ == "__main__":
    _program.run(__doc__, models.resnet_step, models.resnet_batches)
