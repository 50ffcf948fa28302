"""Text recognition and detection: CTC (ChWick/caffe), warp-ctc, senlinuc/caffe_ocr, CTPN,
DeepTextSpotter.

Modules: ``ctc`` (CTCLoss, CTCGreedyDecoder), ``warpctc`` (WarpCTCLoss, CtcLoss,
ContinuationIndicator, LabelsequenceAccuracy, CTCBeamSearchDecoder), ``caffe_ocr`` (Lstm, Reverse,
Transpose and caffe_ocr's CTCGreedyDecoder), ``deeptextspotter`` (MichalBusta/caffe's 2-bottom
CTCLoss).
Built-in Python layer: CTPN's ``layers.text_proposal_layer.ProposalLayer`` (``ctpn``).
Schema: proto/additions.d/face_ocr.json.
"""
from ...layers.python_layer import register_stand_in

for _module, _layer, _target in [
        ('layers.text_proposal_layer', 'ProposalLayer', 'ctpn:TextProposalLayer'),
]:
    register_stand_in(_module, _layer, __name__ + "." + _target)
