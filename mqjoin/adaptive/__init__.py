"""Adaptivity (CLASH Section VI): statistics sampled per epoch (:mod:`.sampling`), the
policy and the controller that re-optimises between epochs and decides whether to switch
plans (:mod:`.controller`).  The engines that run epoch by epoch are
:mod:`mqjoin.runtime.epochs` and :mod:`mqjoin.runtime.spark.epochs`.
"""
