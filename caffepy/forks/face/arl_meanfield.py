"""ZhiwenShao/ARL's MultiStageMeanfieldAU3 (commit 512c2260): CRF-as-RNN mean-field inference
over a facial-action-unit attention map, guided by a feature map of any depth."""
from ...layers.base import register_layer
from ..segmentation.crfasrnn import MultiStageMeanfieldLayer


@register_layer("MultiStageMeanfieldAU3")
class MultiStageMeanfieldAU3Layer(MultiStageMeanfieldLayer):
    """CRF-as-RNN mean field whose bilateral filter compares learned features, not colours
    (ZhiwenShao/ARL, src/multi_stage_meanfield_au3.cpp with its meanfield_iteration.cpp and
    modified_permutohedral.cpp). Per image, P = H x W pixels, C classes, F = bottom 2's channels:

      prob = softmax_C(Q_{t-1});  S = n_s * (K_s prob);  B = n_b * (K_b prob)
      K_s[p, q] = exp(-|pos_p - pos_q|^2 / (2 theta_gamma^2))
      K_b[p, q] = exp(-|pos_p - pos_q|^2 / (2 theta_alpha^2) - |f_p - f_q|^2 / (2 theta_beta^2))
      Q_t = U - W_c (W_s S + W_b B),  t = 0 .. T-1;  top = Q_{T-1}

    with pos = (column, row), f_p the F values of bottom 2 at pixel p, n = 1 / (K 1 + 1e-20),
    U = bottom 0, Q_{-1} = bottom 1. Everything else, the backward pass included (bottoms 0 and 1
    and the three C x C blobs get gradients, bottom 2 none), and the choice between the exact
    dense filter and the permutohedral lattice, is
    :class:`caffepy.forks.segmentation.crfasrnn.MultiStageMeanfieldLayer`'s: the fork carries
    crfasrnn's MeanfieldIteration and ModifiedPermutohedral (the same splat / blur / slice, the
    blur reversed for the backward). The only difference is the bilateral feature: every channel
    of bottom 2 over theta_beta where crfasrnn takes the first three (RGB).

    prototxt: ``multi_stage_meanfield_au3_param { num_iterations (> 1) theta_alpha theta_beta
    theta_gamma compatibility_mode: POTTS threshold spatial_filter_weight: 1
    bilateral_filter_weight: 1 forced_spatial_filter_weight forced_bilateral_filter_weight }``.
    Blobs W_s, W_b, W_c (1 x 1 x C x C). The fork fills the diagonals of W_s and W_b from the
    files spatial.par and bilateral.par in its working directory (ARL ships 3s and 5s, the
    values its prototxts give spatial_filter_weight and bilateral_filter_weight); caffepy fills
    them from those two fields. W_c = -I (POTTS). threshold and the forced_* weights are not read
    by the fork. Bottoms: unary and Q0 (N x C x H x W), features (N x F x H x W); top:
    N x C x H x W.
    """
    param_field = "multi_stage_meanfield_au3_param"
    min_guide_channels = 1

    def _guide(self, img_n, P):
        return img_n.reshape(img_n.shape[0], P).T.astype("float64")
