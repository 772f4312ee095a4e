"""A stand-in for Colab's ``google.colab`` package, for the Colab-like run of the chapters.

``tests/test_colab_like.py`` puts the folder holding ``google`` on the notebook kernel's
path and imports this package when the kernel starts, as Colab does, so that
``"google.colab" in sys.modules`` holds in every chapter. Of Colab's API it provides only
what ``posenc`` touches: :mod:`google.colab.userdata`, the notebook secrets.
"""
