"""Many machines: a sweep's configurations as Ray tasks on hardware targets (issue 12).

dispatch (the head's loop), task (what runs on a node), targets (what a node is and what a
configuration asks for), artifacts (files by sha256), replicas (data-parallel), failures
(sentences). Ray is imported only when OPTIBOARD_RAY_ADDRESS is set.
"""
