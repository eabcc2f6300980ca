"""Inception V3's layer list (Szegedy et al., "Rethinking the Inception Architecture for
Computer Vision", 2016): the stem, then the modules of Figures 5, 6 and 7 with the grid
reductions between them, as Keras's ``InceptionV3`` builds them for 299x299 RGB (the
auxiliary classifier, which Keras leaves out, is not counted)."""

from __future__ import annotations

from simdist.models.builder import ConvNet


def _avg_pool_branch(net: ConvNet, name: str, filters: int) -> ConvNet:
    branch = net.fork()
    branch.pool(f"{name}_pool", 3, 1, padding="same", kind="avg")
    return branch.conv_bn(f"{name}_pool_proj", filters, 1)


def _module_a(net: ConvNet, name: str, pool_filters: int) -> None:
    """Figure 5: 1x1; 1x1 then 5x5; 1x1 then two 3x3; pool then 1x1 (35x35 grid)."""
    b1 = net.fork().conv_bn(f"{name}_1x1", 64, 1)
    b5 = net.fork().conv_bn(f"{name}_5x5_reduce", 48, 1).conv_bn(f"{name}_5x5", 64, 5)
    b3 = net.fork().conv_bn(f"{name}_3x3_reduce", 64, 1).conv_bn(f"{name}_3x3a", 96, 3) \
        .conv_bn(f"{name}_3x3b", 96, 3)
    net.concat(f"{name}_concat", b1, b5, b3, _avg_pool_branch(net, name, pool_filters))


def _reduction_a(net: ConvNet, name: str) -> None:
    """35x35 to 17x17: a stride-2 3x3; 1x1, 3x3, stride-2 3x3; max pool."""
    b3 = net.fork().conv_bn(f"{name}_3x3", 384, 3, 2, "valid")
    bd = net.fork().conv_bn(f"{name}_3x3_reduce", 64, 1).conv_bn(f"{name}_3x3a", 96, 3) \
        .conv_bn(f"{name}_3x3b", 96, 3, 2, "valid")
    pool = net.fork().pool(f"{name}_pool", 3, 2)
    net.concat(f"{name}_concat", b3, bd, pool)


def _module_b(net: ConvNet, name: str, c7: int) -> None:
    """Figure 6: 7x7 factorized into 1x7 and 7x1 (17x17 grid)."""
    b1 = net.fork().conv_bn(f"{name}_1x1", 192, 1)
    b7 = net.fork().conv_bn(f"{name}_7x7_reduce", c7, 1).conv_bn(f"{name}_1x7", c7, (1, 7)) \
        .conv_bn(f"{name}_7x1", 192, (7, 1))
    bd = net.fork().conv_bn(f"{name}_7x7dbl_reduce", c7, 1)
    for i, (k, filters) in enumerate((((7, 1), c7), ((1, 7), c7), ((7, 1), c7),
                                      ((1, 7), 192))):
        bd.conv_bn(f"{name}_7x7dbl_{i + 1}", filters, k)
    net.concat(f"{name}_concat", b1, b7, bd, _avg_pool_branch(net, name, 192))


def _reduction_b(net: ConvNet, name: str) -> None:
    """17x17 to 8x8."""
    b3 = net.fork().conv_bn(f"{name}_3x3_reduce", 192, 1).conv_bn(f"{name}_3x3", 320, 3, 2,
                                                                    "valid")
    b7 = net.fork().conv_bn(f"{name}_7x7x3_reduce", 192, 1)
    b7.conv_bn(f"{name}_1x7", 192, (1, 7)).conv_bn(f"{name}_7x1", 192, (7, 1))
    b7.conv_bn(f"{name}_7x7x3", 192, 3, 2, "valid")
    pool = net.fork().pool(f"{name}_pool", 3, 2)
    net.concat(f"{name}_concat", b3, b7, pool)


def _split_1x3_3x1(net: ConvNet, name: str) -> list[ConvNet]:
    return [net.fork().conv_bn(f"{name}_1x3", 384, (1, 3)),
            net.fork().conv_bn(f"{name}_3x1", 384, (3, 1))]


def _module_c(net: ConvNet, name: str) -> None:
    """Figure 7: the 3x3s split into parallel 1x3 and 3x1 (8x8 grid)."""
    b1 = net.fork().conv_bn(f"{name}_1x1", 320, 1)
    b3 = net.fork().conv_bn(f"{name}_3x3_reduce", 384, 1)
    bd = net.fork().conv_bn(f"{name}_3x3dbl_reduce", 448, 1).conv_bn(f"{name}_3x3dbl", 384, 3)
    net.concat(f"{name}_concat", b1, *_split_1x3_3x1(b3, f"{name}_3x3"),
               *_split_1x3_3x1(bd, f"{name}_3x3dbl"), _avg_pool_branch(net, name, 192))


def inception_v3() -> ConvNet:
    net = ConvNet(299, 299, 3)
    net.conv_bn("conv2d_1a", 32, 3, 2, "valid").conv_bn("conv2d_2a", 32, 3, padding="valid")
    net.conv_bn("conv2d_2b", 64, 3).pool("max_pool_3a", 3, 2)
    net.conv_bn("conv2d_3b", 80, 1, padding="valid").conv_bn("conv2d_4a", 192, 3,
                                                              padding="valid")
    net.pool("max_pool_5a", 3, 2)
    for name, pool_filters in (("mixed_5b", 32), ("mixed_5c", 64), ("mixed_5d", 64)):
        _module_a(net, name, pool_filters)
    _reduction_a(net, "mixed_6a")
    for name, c7 in (("mixed_6b", 128), ("mixed_6c", 160), ("mixed_6d", 160),
                     ("mixed_6e", 192)):
        _module_b(net, name, c7)
    _reduction_b(net, "mixed_7a")
    _module_c(net, "mixed_7b")
    _module_c(net, "mixed_7c")
    return net.global_pool("avg_pool").dense("predictions", 1000)
