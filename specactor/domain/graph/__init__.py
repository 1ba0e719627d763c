"""Graph sync's pure side: `projection` turns a workspace's OpenSpec and AirsSpec files into the
objects and relationships of the specmcp template pack (`model`), for mirroring into Emergent.
Nothing is imported here, so importing one submodule does not load the parsers of the others."""
