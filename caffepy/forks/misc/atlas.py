"""wangshankun/Tengine_Atlas's ``Atlas`` layer: a whole compiled network run on a Huawei Ascend
NPU. caffepy reads its declared top shapes; it cannot compute it."""
from ...layers.base import Layer, register_layer


@register_layer("Atlas")
class AtlasLayer(Layer):
    """Tengine_Atlas (operator/operator/atlas.cpp, executor/operator/atlas/atlas.cpp): the tops'
    shapes are ``atlas_param { output_shape }`` as given (AtlasNode::InferShape), one per top; the
    caffe serializer refuses a count other than ``total_output_layer_nums``. Running it dlopens
    the ``runlib_path`` library named in the config file ``model_name`` and hands the bottoms to
    that vendor runtime's Forword, which executes a compiled .om model on the NPU: there is no
    computation in the fork to reproduce, so the layer gives shapes (summary, draw) and its
    forward is an error.
    """
    min_bottom_blobs = 1
    min_top_blobs = 1

    def layer_setup(self, bottom, top):
        p = self.layer_param.atlas_param
        self.shapes = [tuple(int(d) for d in s.dim) for s in p.output_shape]
        if len(self.shapes) != p.total_output_layer_nums:
            raise self.error("atlas_param: total_output_layer_nums is %d but %d output_shape "
                             "given" % (p.total_output_layer_nums, len(self.shapes)))
        if len(self.shapes) != len(top):
            raise self.error("%d output_shape for %d tops" % (len(self.shapes), len(top)))

    def reshape(self, bottom, top):
        for t, s in zip(top, self.shapes):
            t.reshape(s)

    def forward_cpu(self, bottom, top):
        raise self.error("runs the compiled Ascend model of '%s' through the Huawei NPU runtime "
                         "(Tengine_Atlas's Atlas op); caffepy cannot compute it"
                         % self.layer_param.atlas_param.model_name)
