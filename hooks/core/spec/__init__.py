"""The BatchJob spec: ``batchjob.parse`` reads it once (route, resources, scheduler block),
``layout`` the route and the attempt's files, ``data`` the S3 and claim data, ``endpoints`` the
object stores a spec may name and the allow-lists, ``env_inputs`` and ``payload`` the variables
and files from Secrets and ConfigMaps, ``container`` the image it runs and ``manifests`` what an
image's registry answers about it, and the logins of its pull Secrets.
"""
