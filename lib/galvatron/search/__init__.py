"""Galvatron's first judge, the cost model, and the search it drives (numpy only): ``strategies``, ``profiles``,
``analytic``, ``cost``, ``dynamic_program``, ``plan``, ``engine`` (``search``), ``figures``.
Used in: book/galvatron/01_the_space to 03_the_search."""
