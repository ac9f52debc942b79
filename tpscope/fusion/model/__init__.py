"""The model: column/row-parallel linear layers over the fused ops (`layers`), the
vocabulary-parallel embedding and loss (`vocab`), and the small TP transformer (`model`)."""
