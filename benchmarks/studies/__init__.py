"""The studies, one file each, in the order the page shows them."""

from . import global_batch, gradient_dtype, ps_vs_allreduce, scaling, stragglers, zoo

STUDIES = {s.name: s for s in (scaling.STUDY, ps_vs_allreduce.STUDY, gradient_dtype.STUDY,
                               global_batch.STUDY, stragglers.STUDY, zoo.STUDY)}
