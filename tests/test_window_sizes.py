"""caffepy.math.sizes against values worked by hand from BVLC Caffe's C++ (conv_layer.cpp,
deconv_layer.cpp, pooling_layer.cpp): int division truncates toward zero; ceil / floor of a
float ratio round toward +inf / -inf."""
import pytest

from caffepy.math.sizes import (conv_out_shape, conv_out_size, deconv_out_shape, overhang,
                                pooled_shape, pooled_size)

# (size, kernel, pad, stride, dilation) -> (size + 2 pad - extent) / stride + 1 in C++
CONV = [
    ((7, 3, 0, 2, 1), 3),       # 4 / 2 = 2
    ((6, 3, 0, 2, 1), 2),       # 3 / 2 = 1
    ((5, 3, 1, 2, 1), 3),       # 4 / 2 = 2
    ((2, 3, 0, 2, 1), 1),       # -1 / 2 = 0 (floor: -1, no output)
    ((2, 4, 0, 3, 1), 1),       # -2 / 3 = 0
    ((4, 5, 0, 2, 1), 1),       # -1 / 2 = 0
    ((2, 3, 1, 3, 2), 1),       # extent 5: -1 / 3 = 0
    ((3, 3, 1, 3, 2), 1),       # extent 5: 0 / 3 = 0
    ((2, 3, 0, 1, 1), 0),       # -1 / 1 = -1
    ((1, 3, 0, 2, 1), 0),       # -2 / 2 = -1
    ((1, 5, 0, 3, 1), 0),       # -4 / 3 = -1
    ((1, 7, 0, 3, 1), -1),      # -6 / 3 = -2
    ((2, 3, 0, 2, 0), 1),       # dilation 0: extent 1, 1 / 2 = 0
]


@pytest.mark.parametrize("args,want", CONV)
def test_conv_out_size_divides_like_cpp(args, want):
    assert conv_out_size(*args) == want


def test_conv_and_deconv_shapes():
    assert conv_out_shape((2, 5, 7), (3, 4, 3), (0, 1, 0), (2, 2, 2), (1, 1, 1)) == (1, 2, 3)
    # stride (in - 1) + extent - 2 pad
    assert deconv_out_shape((1, 2, 3, 2), (3, 3, 4, 3), (0, 1, 1, 0), (2, 2, 2, 1),
                            (1, 1, 1, 2)) == (3, 3, 6, 6)


# (size, kernel, stride, pad, ceil) -> static_cast<int>(ceil|floor(float(size + 2 pad - kernel)
# / stride)) + 1, then with padding -1 where (pooled - 1) stride >= size + pad
POOL = [
    ((7, 3, 2, 0, True), 3),    # ceil(2.0)
    ((6, 3, 2, 0, True), 3),    # ceil(1.5)
    ((6, 3, 2, 0, False), 2),   # floor(1.5)
    ((5, 2, 2, 1, True), 3),    # ceil(2.5) + 1 = 4; 3 * 2 >= 6: 3
    ((2, 3, 2, 0, True), 1),    # ceil(-0.5) = -0
    ((2, 3, 2, 0, False), 0),   # floor(-0.5) = -1
    ((2, 4, 3, 0, True), 1),    # ceil(-0.67) = 0
    ((1, 3, 2, 0, True), 0),    # ceil(-1.0) = -1
    ((1, 4, 2, 0, True), 0),    # ceil(-1.5) = -1
    ((1, 4, 3, 1, True), 1),    # ceil(-0.33) = 0; 0 >= 2 no
    ((1, 4, 3, 1, False), 0),   # floor(-0.33) = -1
    ((2, 5, 2, 1, True), 1),    # ceil(-0.5) = 0
]


@pytest.mark.parametrize("args,want", POOL)
def test_pooled_size_rounds_like_c(args, want):
    size, kernel, stride, pad, ceil = args
    assert pooled_size(size, kernel, stride, pad, ceil) == want


def test_pooled_shape_checks_both_axes_when_either_is_padded():
    # h: ceil(4 / 3) + 1 = 3, and 2 * 3 >= 5 + 0 (pad_w is set): 2; w: ceil(5 / 3) + 1 = 3,
    # 2 * 3 >= 5 + 1: 2. Checked per axis (the N-d forks), h would stay 3.
    assert pooled_shape((5, 5), (1, 2), (3, 3), (0, 1)) == (2, 2)
    assert pooled_size(5, 1, 3, 0) == 3
    assert pooled_shape((5, 5), (1, 2), (3, 3), (0, 0)) == (3, 2)
    assert pooled_shape((2, 6), (3, 3), (2, 2), (0, 0), ceil=False) == (0, 2)


def test_overhang_is_the_extra_trailing_padding():
    assert overhang(2, 3, 0, 2, 1, 1) == 1
    assert overhang(2, 3, 1, 3, 2, 1) == 1       # extent 5 over 2 + 2
    assert overhang(7, 3, 0, 2, 1, 3) == 0
    assert overhang(6, 3, 0, 2, 1, 3) == 1       # ceil-rounded pooling's last window
