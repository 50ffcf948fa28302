"""Data I/O as Caffe's: databases, Datums, images, IDX files, the transformer and prefetching.

| module | holds |
|---|---|
| ``db`` | LMDB (``lmdb``) and LevelDB (``plyvel``) readers/writers with Caffe's cursor semantics |
| ``datum`` | Datum <-> numpy, Caffe's image Datum layouts, the .binaryproto mean file |
| ``image`` | image files as OpenCV gives them (BGR uint8), bilinear resize, image list files |
| ``idx`` | IDX (MNIST) files, gzip or plain |
| ``transformer`` | ``transform_param`` (scale, mirror, crop, mean) applied to whole batches |
| ``prefetch`` | the background batch-preparation thread of the data layers |
| ``convert`` | convert_imageset / compute_image_mean / convert_mnist as functions |

The layers using them live in ``caffepy/layers/data.py`` (Data), ``data_memory.py`` (MemoryData),
``data_image.py`` (ImageData), ``data_hdf5.py`` (HDF5Data, HDF5Output) and ``data_window.py``
(WindowData).
"""
