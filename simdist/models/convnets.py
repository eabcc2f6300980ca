"""The image models' layer lists, built from their stage tables as the papers give them:
ResNet (He et al. 2016, Table 1), VGG (Simonyan and Zisserman 2015, Table 1, config D),
MobileNetV2 (Sandler et al. 2018, Table 2) and Inception V3 (Szegedy et al. 2016, Figures 5-7,
``inception.py``). Each is what ``tf.keras.applications`` builds for 224x224 RGB (299x299 for
Inception V3) and 1,000 classes."""

from __future__ import annotations

from simdist.models.builder import ConvNet

#: ResNet's bottleneck blocks per stage, by depth (He et al. 2016, Table 1)
RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
RESNET_WIDTHS = (64, 128, 256, 512)  # each block's 1x1 and 3x3 width; its output is 4x
#: VGG's configuration D: filters of each 3x3 conv, "M" a 2x2 max pool
VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
         512, 512, 512, "M")
#: MobileNetV2's bottlenecks: expansion t, output channels c, repeats n, first stride s
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))
CLASSES = 1000


def resnet(depth: int) -> ConvNet:
    """ResNet v1 as Keras's ``ResNet50``/``ResNet101``: the stride of a stage's first block in
    its first 1x1 conv (torchvision's "v1.5" moves it to the 3x3, about 6% more FLOPs)."""
    net = ConvNet(224, 224, 3)
    net.conv_bn("conv1", 64, 7, stride=2).pool("pool1", 3, 2, padding="same")
    for stage, (blocks, width) in enumerate(zip(RESNET_BLOCKS[depth], RESNET_WIDTHS), 2):
        for block in range(1, blocks + 1):
            name = f"conv{stage}_block{block}"
            stride = 2 if block == 1 and stage > 2 else 1
            shortcut = net.fork()
            if block == 1:
                shortcut.conv_bn(f"{name}_0", 4 * width, 1, stride, relu=False)
            residual = net.fork()
            residual.conv_bn(f"{name}_1", width, 1, stride)
            residual.conv_bn(f"{name}_2", width, 3)
            residual.conv_bn(f"{name}_3", 4 * width, 1, relu=False)
            net.add(f"{name}_add", shortcut, residual)
    return net.global_pool("avg_pool").dense("predictions", CLASSES)


def vgg16() -> ConvNet:
    """VGG-16 as Keras's ``VGG16``: 13 3x3 convs with biases and ReLU, 3 dense layers."""
    net, block, conv = ConvNet(224, 224, 3), 1, 1
    for filters in VGG16:
        if filters == "M":
            net.pool(f"block{block}_pool", 2, 2)
            block, conv = block + 1, 1
        else:
            net.conv(f"block{block}_conv{conv}", filters, 3, bias=True, relu=True)
            conv += 1
    return net.dense("fc1", 4096, relu=True).dense("fc2", 4096, relu=True).dense(
        "predictions", CLASSES)


def mobilenet_v2() -> ConvNet:
    """MobileNetV2 (width 1.0) as Keras's ``MobileNetV2``: inverted residual bottlenecks of
    expand 1x1, depthwise 3x3 and a linear 1x1 projection; ReLU6 after the first two."""
    net = ConvNet(224, 224, 3)
    net.conv_bn("Conv1", 32, 3, stride=2)
    index = 0
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            name, stride = f"block_{index}", s if i == 0 else 1
            inputs = net.fork()
            branch = net.fork()
            if t != 1:
                branch.conv_bn(f"{name}_expand", t * net.shape.c, 1)
            branch.depthwise(f"{name}_depthwise", 3, stride).bn(f"{name}_depthwise_bn")
            branch.conv_bn(f"{name}_project", c, 1, relu=False)
            if stride == 1 and inputs.shape.c == c:
                net.add(f"{name}_add", inputs, branch, relu=False)
            else:
                net.shape = branch.shape
            index += 1
    net.conv_bn("Conv_1", 1280, 1)
    return net.global_pool("global_average_pooling2d").dense("predictions", CLASSES)
