"""The API's resources, each as a blocking class and its ``Async`` twin with the same methods."""
