"""The BatchJob spec: ``batchjob.parse`` reads it once (route, resources, scheduler block),
``layout`` the route and the attempt's files, ``data`` the S3 and claim data, ``env_inputs`` and
``payload`` the variables and files from Secrets and ConfigMaps.
"""
