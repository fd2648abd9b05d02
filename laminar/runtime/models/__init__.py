"""Models and tokenizers: the tiny model, random real architectures, pretrained dirs, codecs."""
